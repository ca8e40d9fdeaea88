#!/bin/bash
# Builds /app/srv with a mix of permission problems.
set -euo pipefail
mkdir -p /app/srv/{bin,conf,data/uploads,data/cache,logs}
cd /app/srv
printf '#!/bin/sh\necho run\n' > bin/run.sh;       chmod 4755 bin/run.sh
printf '#!/bin/sh\necho ok\n' > bin/health.sh;     chmod 755 bin/health.sh
printf '#!/bin/sh\necho x\n' > bin/tool;           chmod 2775 bin/tool
printf 'password=hunter2\n' > conf/secret.env;     chmod 644 conf/secret.env
printf 'port=80\n' > conf/app.conf;                chmod 666 conf/app.conf
printf 'k\n' > conf/tls.key;                       chmod 640 conf/tls.key
printf 'up\n' > data/uploads/a.jpg;                chmod 777 data/uploads/a.jpg
printf 'c\n' > data/cache/blob;                    chmod 600 data/cache/blob
printf 'log\n' > logs/app.log;                     chmod 622 logs/app.log
chmod 777 data/uploads
chmod 1777 data/cache
chmod 755 bin conf data logs
ln -s ../conf/missing.conf bin/broken-link
ln -s ../conf/app.conf bin/good-link
chmod 777 /app/srv
