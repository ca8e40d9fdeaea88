#!/bin/bash
set -euo pipefail
cd /app
cat crontab.draft
ls -l bin
cat > crontab <<'CRON'
SHELL=/bin/bash
MAILTO=ops@example.com
PATH=/usr/local/bin:/usr/bin:/bin

# m   h     dom  mon        dow  command
30    2     *    *          *    /app/bin/backup.sh
*/15  8-17  *    *          1-5  /app/bin/rotate-logs.sh
0     6     1    *          *    /app/bin/report.sh monthly
45    23    *    *          0    /app/bin/cleanup.sh
*/5   *     *    *          *    /app/bin/ping.sh
0     0     1    1,4,7,10   *    /app/bin/quarterly.sh
CRON
chmod 755 bin/*.sh
ls -l bin
