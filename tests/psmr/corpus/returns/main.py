def make_adder():
    def add(x):
        return x + 1
    return add


class Worker:
    def run(self):
        pass


def factory():
    return Worker()


adder = make_adder()
adder(1)
factory().run()
