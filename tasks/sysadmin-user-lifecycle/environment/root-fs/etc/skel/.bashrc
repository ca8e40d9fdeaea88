# ~/.bashrc
alias ll="ls -l"
