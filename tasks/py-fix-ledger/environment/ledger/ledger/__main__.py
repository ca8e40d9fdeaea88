"""Command line: python3 -m ledger balances FILE.csv"""

import sys

from ledger.core import Ledger
from ledger.money import format_amount


def main(argv):
    if len(argv) != 2 or argv[0] != "balances":
        print("usage: python3 -m ledger balances FILE.csv", file=sys.stderr)
        return 2
    ledger = Ledger.from_csv(argv[1])
    for account in ledger.accounts():
        print(f"{account}\t{format_amount(ledger.balance(account))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
