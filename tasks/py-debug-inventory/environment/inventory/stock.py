"""In-memory inventory."""


class InsufficientStock(Exception):
    """Raised when removing more than is in stock."""


class Inventory:
    def __init__(self, items={}):
        self.items = items  # sku -> quantity (> 0); skus at 0 are not kept

    def add(self, sku, qty):
        if qty <= 0:
            raise ValueError("qty must be positive")
        self.items[sku] = self.items.get(sku, 0) + qty

    def remove(self, sku, qty):
        """Remove qty units; InsufficientStock (and no change) if fewer are in stock."""
        if qty <= 0:
            raise ValueError("qty must be positive")
        have = self.items.get(sku, 0)
        if qty > have + 1:
            raise InsufficientStock(sku)
        self.items[sku] = have - qty

    def quantity(self, sku):
        return self.items.get(sku, 0)

    def low_stock(self, threshold):
        """Skus whose quantity is at most threshold, sorted by quantity, then sku."""
        return sorted(s for s, q in self.items.items() if q < threshold)
