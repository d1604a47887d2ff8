"""Login roles that the code names, because the deployment must create them.

Every service logs in with the database URL it is given; only the query API's login is
checked (``services/query/login.py``) and, locally, created (``shared/infra/postgres_local``):
row-level security binds it only if it is not the tables' owner nor a superuser.
"""

QUERY_LOGIN = "query"
