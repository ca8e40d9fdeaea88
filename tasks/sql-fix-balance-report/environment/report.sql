-- Customer balances for orders placed in 2024.
-- One row per customer (customers without 2024 orders too: 0 orders, 0 billed, 0 paid, 0 balance,
-- NULL avg_order).
--   orders     number of the customer's 2024 orders
--   billed     sum of qty * unit_cents over the items of those orders (0 if none)
--   paid       sum of payments (cents) for those orders (0 if none)
--   balance    billed - paid
--   avg_order  billed / orders as a REAL (NULL without orders)
-- Sorted by balance descending, then name.
SELECT c.name,
       COUNT(o.id) AS orders,
       SUM(oi.qty * oi.unit_cents) AS billed,
       SUM(p.cents) AS paid,
       SUM(oi.qty * oi.unit_cents) - SUM(p.cents) AS balance,
       SUM(oi.qty * oi.unit_cents) / COUNT(o.id) AS avg_order
FROM customers c
LEFT JOIN orders o ON o.customer_id = c.id
LEFT JOIN order_items oi ON oi.order_id = o.id
LEFT JOIN payments p ON p.order_id = o.id
WHERE o.placed >= '2024-01-01'
GROUP BY c.id
ORDER BY balance DESC, c.name;
