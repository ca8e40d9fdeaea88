#!/bin/bash
set -euo pipefail
cd /app/conf
cp -p app.ini app.ini.orig
sed -i '/^\[server\]/,/^\[/{s/^host = .*/host = 127.0.0.1/;s/^workers = .*/workers = 8/}' app.ini
sed -i '/^\[logging\]/,/^\[/s/^level = .*/level = WARNING/' app.ini
sed -i '/^\[features\]/,/^\[/s/^legacy_api = on$/; legacy_api = on/' app.ini
printf '\n[metrics]\nenabled = true\nport = 9100\n' >> app.ini
diff app.ini.orig app.ini || true
