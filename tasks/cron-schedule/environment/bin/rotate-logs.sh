#!/bin/bash
echo "rotate-logs $*"
