"""The service: one-click approval links, the approval page, the Alertmanager webhook."""
