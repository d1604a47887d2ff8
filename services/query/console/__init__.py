"""The operator console (issue 9): a web page over the query API, served by the query process."""
