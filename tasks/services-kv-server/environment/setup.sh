#!/bin/bash
set -euo pipefail
mkdir -p /app/kv  # empty folders do not survive git: make them here
