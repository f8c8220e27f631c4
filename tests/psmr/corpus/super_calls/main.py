class Base:
    def setup(self):
        return "base"


class Left(Base):
    def setup(self):
        return super().setup()


class Right(Base):
    def setup(self):
        return super().setup()


class Both(Left, Right):
    def setup(self):
        return super().setup()


class Logged(Base):
    def __init__(self):
        super().__init__()
        self.ready = self.setup()


Both().setup()
Left().setup()
Logged()
