#!/bin/bash
echo "backup $*"
