#!/bin/bash
echo "ping $*"
