#!/bin/bash
set -euo pipefail
cd /app
python3 run_report.py shop.db
cat > report.sql <<'SQL'
-- Customer balances for orders placed in 2024.
-- One row per customer (customers without 2024 orders too: 0 orders, 0 billed, 0 paid, 0 balance,
-- NULL avg_order).
--   orders     number of the customer's 2024 orders
--   billed     sum of qty * unit_cents over the items of those orders (0 if none)
--   paid       sum of payments (cents) for those orders (0 if none)
--   balance    billed - paid
--   avg_order  billed / orders as a REAL (NULL without orders)
-- Sorted by balance descending, then name.
WITH o AS (
  SELECT o.id, o.customer_id,
         (SELECT COALESCE(SUM(qty * unit_cents), 0) FROM order_items WHERE order_id = o.id) AS billed,
         (SELECT COALESCE(SUM(cents), 0) FROM payments WHERE order_id = o.id) AS paid
  FROM orders o
  WHERE o.placed >= '2024-01-01' AND o.placed < '2025-01-01'
)
SELECT c.name,
       COUNT(o.id) AS orders,
       COALESCE(SUM(o.billed), 0) AS billed,
       COALESCE(SUM(o.paid), 0) AS paid,
       COALESCE(SUM(o.billed), 0) - COALESCE(SUM(o.paid), 0) AS balance,
       CASE WHEN COUNT(o.id) > 0 THEN SUM(o.billed) * 1.0 / COUNT(o.id) END AS avg_order
FROM customers c
LEFT JOIN o ON o.customer_id = c.id
GROUP BY c.id
ORDER BY balance DESC, c.name;
SQL
python3 run_report.py shop.db > report.csv
cat report.csv
