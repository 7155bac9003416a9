"""SQL handling: the one execution point, dialect transpiling and (later) the guard."""
