"""Datasources, the sample warehouse and (later) the datalayer."""
