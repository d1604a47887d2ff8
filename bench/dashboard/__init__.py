"""The Grafana dashboard drawn from real metrics: a benchmark run scraped by a real Prometheus."""
