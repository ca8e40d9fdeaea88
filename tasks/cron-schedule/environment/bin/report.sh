#!/bin/bash
echo "report $*"
