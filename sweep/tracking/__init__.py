"""MLflow: the parent and child runs of a study (tracker), how they are written (sinks), the migrated store,
the UI server, and URIs shown with their passwords masked."""
