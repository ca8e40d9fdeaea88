#!/bin/bash
echo "cleanup $*"
