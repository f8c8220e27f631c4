class Countdown:
    def __init__(self, start):
        self.current = start

    def __iter__(self):
        return self

    def __next__(self):
        if self.current <= 0:
            raise StopIteration
        self.current -= 1
        return self.current


class Bag:
    def __init__(self):
        self.items = [1, 2]

    def __iter__(self):
        return iter(self.items)


class Pages:
    def __init__(self):
        self.cursor = Cursor()

    def __iter__(self):
        return self.cursor


class Cursor:
    def __next__(self):
        raise StopIteration


def make_countdown():
    return Countdown(3)


def walk():
    for _ in make_countdown():
        pass


def total():
    return sum(n for n in Bag())


def turn():
    for page in Pages():
        print(page)


walk()
total()
turn()
