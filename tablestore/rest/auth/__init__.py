"""Who is asking and what they may do: the service's tokens (``tokens``), external OpenID
Connect issuers (``oidc``, ``oidc_settings``), grants (``grants``) and the one authorizer
the service picks at start-up (``authorizer``)."""
