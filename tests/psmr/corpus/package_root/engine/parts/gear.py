from ...engine import parts


def spin():
    return Gear().turn()


class Gear:
    def turn(self):
        return helper()


def helper():
    return parts
