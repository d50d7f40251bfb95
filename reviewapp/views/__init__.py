"""HTML pages, one module per area. Thin: parse the request, call a service, render."""
