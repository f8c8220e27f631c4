class Query:
    def __init__(self):
        self.parts = []

    def where(self, part):
        self.parts.append(part)
        return self

    def build(self):
        return " and ".join(self.parts)

    @classmethod
    def create(cls):
        return cls()


class CachedQuery(Query):
    def build(self):
        return "cached"


def run():
    CachedQuery().where("a").build()
    return CachedQuery.create().where("b").build()


run()
