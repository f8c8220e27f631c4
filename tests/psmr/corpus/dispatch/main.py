class Shape:
    def describe(self):
        return f"{self.name()} of area {self.area()}"

    def name(self):
        return "shape"


class Square(Shape):
    def __init__(self, side):
        self.side = side

    def area(self):
        return self.side**2


class Circle(Shape):
    def __init__(self, radius):
        self.radius = radius

    def area(self):
        return 3 * self.radius**2

    def name(self):
        return "circle"


class Sketch(Shape):
    # Never instantiated: no call through Shape.describe reaches it.
    def area(self):
        return 0


class Job:
    def run(self):
        self.prepare()
        return self.execute()

    def prepare(self):
        return None


class Backup(Job):
    def execute(self):
        return "backup"


class Report(Job):
    def prepare(self):
        return "ready"

    def execute(self):
        return "report"


def main():
    for shape in (Square(2), Circle(1)):
        print(shape.describe())
    jobs = [Backup(), Report()]
    return [job.run() for job in jobs]


main()
