class AppError(Exception):
    def __init__(self, msg):
        self.msg = msg

    def describe(self):
        return "app"


def risky():
    raise AppError("bad")


def handle():
    try:
        risky()
    except AppError as err:
        err.describe()


handle()
