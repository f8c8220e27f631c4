from app import start
from app.core.sub.deep import go

start()
go()
