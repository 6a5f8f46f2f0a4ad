"""On-disk formats shared by the converter (writers) and the loader (readers); each on-disk fact has
one owner here, with its writer and reader side by side."""
