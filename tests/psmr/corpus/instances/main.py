class Point:
    def __init__(self, x):
        self.x = x

    def moved(self, dx):
        return type(self)(self.x + dx)

    def copy(self):
        return self.__class__(self.x)

    def show(self):
        return str(self.x)


class Outer:
    class Inner:
        def ping(self):
            return "inner"

    def make(self):
        return self.Inner()


def use():
    p = Point(1).moved(2)
    p.show()
    Point(3).copy().show()
    Outer().make().ping()
    return (lambda: p.show())()


use()
