"""The service's access to object storage on a client's behalf: vended credentials
(``credentials``, STS AssumeRole) and remote signing of S3 requests (``signing``)."""
