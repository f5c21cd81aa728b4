"""End-to-end tests: real `ce` processes around a real room."""
