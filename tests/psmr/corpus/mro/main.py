class A:
    def who(self):
        return "A"

    def hello(self):
        return self.who()


class B(A):
    def who(self):
        return "B"


class C(A):
    def greet(self):
        return self.hello()


class D(B, C):
    pass


class E(A):
    # Never instantiated: a call through A.hello never reaches E.who.
    def who(self):
        return "E"


D().greet()
B().hello()
