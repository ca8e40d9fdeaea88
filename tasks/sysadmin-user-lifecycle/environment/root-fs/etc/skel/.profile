# ~/.profile
. ~/.bashrc
