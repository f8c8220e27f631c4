import argparse
import json
from collections import OrderedDict

import ext_lib
from ext_lib.widgets import Widget


class Panel(Widget):
    def render(self):
        return "panel"

    def draw(self):
        self.render()
        self.refresh()
        return super().draw()


def options():
    parser = argparse.ArgumentParser()
    parser.add_argument("--size")
    return parser.parse_args()


def ordered():
    table = OrderedDict()
    table.move_to_end("a")
    return json.loads("{}")


def connect():
    return ext_lib.Client.connect("host")


Panel().draw()
Panel().show()
options()
ordered()
connect()
