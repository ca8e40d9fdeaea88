#!/bin/bash
echo "quarterly $*"
