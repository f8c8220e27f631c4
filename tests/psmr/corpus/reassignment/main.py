def draft():
    return "draft"


def final():
    return "final"


def retry():
    return "retry"


class Printer:
    def send(self):
        return "printer"


class Screen:
    def send(self):
        return "screen"


def publish():
    action = draft
    action = final
    return action()


def show():
    device = Printer()
    device = Screen()
    return device.send()


def attempt(times):
    step = draft
    for _ in range(times):
        step()
        step = retry
    return step()


def choose(flag):
    handler = draft
    if flag:
        handler = final
    return handler()


def later():
    job = draft

    def run():
        return job()

    job = final
    return run()


current = draft
current = retry
current()
publish()
show()
attempt(2)
choose(True)
later()
