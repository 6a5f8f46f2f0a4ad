"""Public datasets read through an adapter: a mapping from their published schema and files to a
kind's rows, the plan that groups those rows into chains, and the in-place row source training reads.

The converter's front end (``editstream.adapters``) writes these rows out; training reads them here, so
both see the same chains, drops and counts and neither loads the other.
"""
