class Shape:
    def __init__(self, name):
        self.name = name

    def describe(self):
        return self.label()

    def label(self):
        return self.name


class Square(Shape):
    def __init__(self):
        super().__init__("square")

    def area(self):
        return 4


s = Square()
s.describe()
s.area()
Shape("x").label()
