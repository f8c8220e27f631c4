import pkg
from pkg.models import Model
import pkg.util as u

pkg.helper()
Model().save()
u.helper()
