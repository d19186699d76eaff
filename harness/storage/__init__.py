"""Where results live and how they are written: the layout, the row schema, atomic writes. Torch-free."""
