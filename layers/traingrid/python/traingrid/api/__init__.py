"""The REST API: one Powertools resolver, a router per resource (``runs``, ``campaigns``,
``costs``)."""
