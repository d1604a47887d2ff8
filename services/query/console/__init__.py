"""The operator console: a web page over the query API, served by the query process."""
