"""What operators see: Prometheus metrics (`metrics`), the client meters behind them (`metered`) and the log
format (`logs`). The HTTP edge's request observer is `server/observer.py`."""
