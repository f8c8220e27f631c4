"""PSMR test set-up: trees built from strings, and one shared workspace of a small shop package."""

from __future__ import annotations

from pathlib import Path

import pytest

from slotrelay.psmr.api import build_workspace
from tests.support.psmr_trees import write_tree

SHOP = {
    "shop/__init__.py": "from .pricing import price\n\n\ndef price(item):\n    return 0\n",
    "shop/pricing.py": '''import sys

TAX = 1.2


def price(item):
    """Price of an item."""
    assert item is not None
    return len(str(item))


if sys.version_info >= (3, 11):
    def discount(x):
        return x * 0.9
else:
    def discount(x):
        return x
''',
    "shop/cart.py": '''import json
import subprocess

from .pricing import TAX, discount, price

COUNT = 0


class Cart:
    def __init__(self):
        self.items = []
        self.total = 0

    def add(self, item):
        global COUNT
        COUNT += 1
        self.items.append(item)
        self.total = self.total + price(item)
        assert self.total >= 0
        return self.total

    def checkout(self, path):
        """Write the cart and notify."""
        if not self.items:
            raise ValueError("empty cart")
        with open(path, "w") as handle:
            json.dump(self.items, handle)
        subprocess.run(["notify", path], check=False)
        return discount(self.total) * TAX

    def handler(self, callback):
        return callback(self)
''',
    "tests/test_cart.py": """from shop.cart import Cart


def test_add():
    cart = Cart()
    assert cart.add("x") > 0
""",
    "bad.py": "def broken(:\n    pass\n",
}


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """(workspace_id, store) of the shop tree, built once per test module."""
    root = write_tree(tmp_path_factory.mktemp("shop"), SHOP)
    store = root.parent / f"{root.name}-store"
    summary = build_workspace(root, store=store)
    return summary["workspace_id"], store
