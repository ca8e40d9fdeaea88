#!/bin/bash
set -euo pipefail
mkdir -p /app/bin  # empty folders do not survive git: make them here
