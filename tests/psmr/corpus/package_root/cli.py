from . import start
from .engine.parts.gear import Gear


def main():
    start()
    return Gear().turn()
