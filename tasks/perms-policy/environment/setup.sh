#!/bin/bash
# Builds /app/srv with a mess of permissions.
set -euo pipefail
umask 000
S=/app/srv
mkdir -p $S/www/uploads $S/www/css $S/bin $S/secrets $S/logs/old
printf '<h1>site</h1>\n' > $S/www/index.html
printf 'body{}\n' > $S/www/css/site.css
printf 'img\n' > $S/www/uploads/cat.jpg
printf '#!/bin/sh\necho deploy\n' > $S/bin/deploy.sh
printf '#!/bin/sh\necho helper\n' > $S/bin/helper
printf '#!/bin/sh\necho rotate\n' > $S/bin/rotate
printf 'dbpass\n' > $S/secrets/db.key
printf 'token\n' > $S/secrets/api.token
printf 'line\n' > $S/logs/app.log
printf 'old\n' > $S/logs/old/app.log.1
ln -s /etc/hostname $S/www/host-link
chmod 777 $S $S/www $S/www/css $S/logs $S/logs/old
chmod 1777 $S/www/uploads
chmod 666 $S/www/index.html $S/www/uploads/cat.jpg $S/logs/app.log
chmod 664 $S/www/css/site.css
chmod 644 $S/bin/deploy.sh
chmod 4755 $S/bin/helper
chmod 2775 $S/bin/rotate $S/bin
chmod 755 $S/secrets
chmod 644 $S/secrets/db.key
chmod 6444 $S/secrets/api.token
chmod 600 $S/logs/old/app.log.1
