#!/bin/bash
set -euo pipefail
cd /app/srv
ls -l bin
head -c 40 bin/apptool | od -c | head -n 3
sed -i 's/\r$//' bin/apptool
chmod 755 bin/apptool
cat > profile.sh <<'SH'
# sourced by bash: environment of the app
export APP_HOME=/app/srv
export APP_ENV=production
case ":$PATH:" in
  *":/app/srv/bin:"*) PATH="/app/srv/bin:$(printf '%s' ":$PATH:" | sed -e 's#:/app/srv/bin:#:#g' -e 's#^:##' -e 's#:$##')" ;;
  *) PATH="/app/srv/bin${PATH:+:$PATH}" ;;
esac
export PATH
umask 027
SH
mkdir -p logs
chmod 2770 logs
bash -c 'source /app/srv/profile.sh; source /app/srv/profile.sh; echo "$PATH"; umask; apptool'
