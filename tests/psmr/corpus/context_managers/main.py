class Lock:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def held(self):
        return True


class Opener:
    def __enter__(self):
        return Handle()

    def __exit__(self, *exc):
        return False

    def read(self):
        return "opener"


class Handle:
    def read(self):
        return "handle"


class Session:
    def __init__(self, name):
        self.name = name

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False


class Resource:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def use(self):
        with self:
            return 1


def open_lock():
    return Lock()


def work():
    with open_lock() as lock:
        lock.held()


def read():
    with Opener() as handle:
        return handle.read()


async def serve():
    async with Session("s"):
        pass


work()
read()
serve()
Resource().use()
