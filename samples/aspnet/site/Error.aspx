<%@ Page Language="C#" %>
<script runat="server">
    protected void Page_Load(object sender, EventArgs e)
    {
        Response.StatusCode = 500;
        Response.TrySkipIisCustomErrors = true;
    }
</script>
<!DOCTYPE html>
<html><head><title>Something went wrong</title></head>
<body><h1>Sorry, something went wrong.</h1><p id="error-page">The error was logged.</p></body></html>
